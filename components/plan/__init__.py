"""The offline tools: run the program under mocks, write the plan, diff two plans, summarise, document.

``python -m components.plan`` (:mod:`components.plan.writer`), ``python -m components.plandiff``
(:mod:`components.plan.diff`) and ``python -m components.reference``
(:mod:`components.plan.reference`). Nothing here is part of a ``pulumi up``; the program runs from
``__main__.py``, which :mod:`components.plan.offline` executes as the engine would.
"""
