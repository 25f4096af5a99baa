"""gpuaas: one typed stack config in, a GPU-as-a-Service platform on Kubernetes out.

The packages are layers, and imports only go down (ARCHITECTURE.md; ``make lint`` checks it with
import-linter): :mod:`components.model` (the config and what follows from it) and the shell
:mod:`components.k8s` at the bottom, :mod:`components.rules` and :mod:`components.loader` above the
model, the day-2 :mod:`components.guards`, the areas (:mod:`components.fabric`,
:mod:`components.operators`, :mod:`components.clusters`, :mod:`components.tenancy`,
:mod:`components.queueing`, :mod:`components.dra`, :mod:`components.proofs`), and on top
:mod:`components.platform` (the install order) and the offline tools in :mod:`components.plan`.
"""
