"""The on-prem InfiniBand fabric: partitions and OpenSM, the SR-IOV host side, Multus, the RDMA node settings.

Everything that decides which VF a pod gets and which partition it is in, on the hosts and in the
subnet manager; the operators that run the fabric's plugins (:mod:`components.operators`) read
its renderers.
"""
