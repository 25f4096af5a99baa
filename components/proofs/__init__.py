"""The verification proofs, one module per proof: ib_write_bw, NCCL, isolation probes, burn-in; and the component."""
