"""``python -m components.reference``: prints the README's config reference (:mod:`components.plan.reference`)."""

from components.plan.reference import render

if __name__ == "__main__":
    print(render(), end="")
