"""Teams as tenants: namespaces, quotas, RBAC, team networks, and the admission guards that hold them apart.

:mod:`components.tenancy.policy` is the one ValidatingAdmissionPolicy builder every guard uses.
"""
