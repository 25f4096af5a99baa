"""gpuaas: load the stack config, build the platform, export what operators read."""

import pulumi

from components.guards.gate import FORMAT, FORMAT_KEY, STACK_KEY
from components.loader import load_config
from components.platform import Platform

cfg = load_config()
platform = Platform("gpuaas", cfg)

pulumi.export("platform", cfg.platform.kind)
for key, value in platform.exports.items():
    pulumi.export(key, value)
# Whose outputs these are, and their format: what a day-2 guard's --previous file is checked by.
pulumi.export(STACK_KEY, pulumi.get_stack())
pulumi.export(FORMAT_KEY, FORMAT)
