"""A child for tests/unit/test_child_process.py: runs the Python its stdin sends."""

import sys

if __name__ == "__main__":
    exec(sys.stdin.read())  # the test's own code
