"""``python -m components.reference``: prints the README's config reference (:mod:`components.plan.reference`)."""

from components.plan.reference import render
from components.plan.stdout import emit

if __name__ == "__main__":
    raise SystemExit(0 if emit(render()) else 1)
