"""`python -m contextwright.cli`: the same as the `contextwright` command."""

from . import main

main()
