"""The cluster itself: the AKS cluster and its GPU pools, or the labels of existing on-prem nodes."""
