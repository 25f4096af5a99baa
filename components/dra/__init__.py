"""The DRA resource model's cluster objects: MIG DeviceClasses, the teams' claim templates and the claim guards."""
