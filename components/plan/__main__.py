"""``python -m components.plan <stack>``: the offline plan (:mod:`components.plan.writer`)."""

from components.plan.writer import main

if __name__ == "__main__":
    raise SystemExit(main())
