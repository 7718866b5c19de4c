"""The lab's container infrastructure, driven by lab/labctl (runs as root on the lab machine)."""
