"""The components as a Pulumi component package: package-facing types, their mapping, the provider."""
