"""gpuaas: one typed stack config in, a GPU-as-a-Service platform on Kubernetes out.

Pure modules (config, catalog, mig, partitions, quotas, renderers) import nothing from Pulumi;
component modules turn their results into resources.
"""
