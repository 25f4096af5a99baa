"""The NVIDIA operators: Network Operator and NicClusterPolicy, RDMA shared device plugin, GPU Operator."""
