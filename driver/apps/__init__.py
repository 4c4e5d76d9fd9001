"""App-specific knowledge the manifests cannot carry (config -> role variables, access bundle)."""
