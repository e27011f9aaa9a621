"""``python -m retest``: the command of the interpreter's own installation.

Messages name the program ``retest`` (as the installed command), not
``python -m retest``.
"""

from retest.cli.main import main

if __name__ == "__main__":
    main(prog_name="retest")
