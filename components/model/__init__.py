"""The stack config and what follows from it by arithmetic; pure, no Pulumi, imports nothing above it.

One module per config section (``platform``, ``fabric``, ``sharing``, ``network``,
``gpu_operator``, ``teams``, ``queues``, ``verification``, ``versions``; the root in ``config``),
the domain types and grammars they are checked with, the catalog and MIG geometry, the names of
extended resources and labels, and the facts every area reads: fleet capacity, elastic lending,
the DRA resource model and VF GUIDs; and ``kubernetes``, the one table of the Kubernetes minors a
stack may run (support dates, feature gates, what else moves with a minor).
"""
