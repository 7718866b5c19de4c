"""python -m infertune rollout|verify ..."""
import sys

from infertune.cli import main

sys.exit(main())
