"""Hardware model of a lab host: renders sysfs/procfs files and PCI config space.

Stdlib only: it runs as PID 1 inside the lab containers (lab/boot/init) and is
imported by the unit tests on the control node.
"""
