"""Elastic team quotas with Kueue: the release, flavors and team queues, and the guards that send GPU work there."""
