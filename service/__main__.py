import sys

from service.cli import main

if __name__ == "__main__":  # parser processes (spawn) import this module as __mp_main__
    sys.exit(main())
