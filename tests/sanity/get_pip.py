"""Stand-in for get-pip.py, which ansible-test downloads to put pip into each virtual environment it
makes (sanity --venv). Its host is not a package registry, and this project's machines reach only
those: this installs the pip ansible-test asks for from the package index instead, with the pip
wheel the interpreter bundles (ensurepip's). `make sanity` copies it where ansible-test caches the
script.

ansible-test runs it as get-pip.py: python get_pip.py [pip options] pip==X --no-setuptools --no-wheel.
"""
import glob
import os
import subprocess
import sys

import ensurepip

# get-pip.py's own options: this installs the packages named, nothing else.
OWN_OPTIONS = ("--no-setuptools", "--no-wheel")


def main():
    wheel = glob.glob(os.path.join(os.path.dirname(ensurepip.__file__), "_bundled", "pip-*.whl"))[0]
    args = [arg for arg in sys.argv[1:] if arg not in OWN_OPTIONS]
    # A wheel is importable as a zip: its pip runs without being installed first.
    return subprocess.call([sys.executable, os.path.join(wheel, "pip"), "install", "--quiet", *args])


if __name__ == "__main__":
    sys.exit(main())
