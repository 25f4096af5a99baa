"""Day-2 guards: a change that would disturb running pods stops the run unless the config acknowledges it.

Each guard compares the config with the stack's last outputs (a StackReference to itself): MIG
layouts (:mod:`components.guards.mig`), the fabric (:mod:`components.guards.fabric`) and the GPU
resource model (:mod:`components.guards.resource_model`); :mod:`components.guards.gate` reports them
together and holds back what must wait for them.
"""
