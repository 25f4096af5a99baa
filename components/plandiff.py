"""``python -m components.plandiff`` (``make diff``): the entry point of :mod:`components.plan.diff`."""

from components.plan.diff import main

if __name__ == "__main__":
    raise SystemExit(main())
