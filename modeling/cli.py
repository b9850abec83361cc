"""What every script shares: user errors become one line on stderr and exit status 2."""
import os
import sys

from absl import app


def run(main):
    """Runs an absl `main`, turning the errors a user can cause into a one-line message.

    ValueError and FileNotFoundError carry messages that name the file, line or value at fault;
    a traceback would only bury them. Anything else is a bug and keeps its traceback.
    """
    def guarded(argv):
        try:
            return main(argv)
        except (ValueError, FileNotFoundError) as error:
            print(f"{os.path.basename(sys.argv[0])}: error: {error}", file=sys.stderr)
            sys.exit(2)
    app.run(guarded)
