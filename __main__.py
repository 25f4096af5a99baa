"""gpuaas: load the stack config, build the platform, export what operators read."""

import pulumi

from components.loader import load_config
from components.platform import Platform

cfg = load_config()
platform = Platform("gpuaas", cfg)

pulumi.export("platform", cfg.platform.kind)
for key, value in platform.exports.items():
    pulumi.export(key, value)
