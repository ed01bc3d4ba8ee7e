"""fabric-ls: find Lightning Fabric setup mistakes before the job runs."""

__version__ = "0.1.0"
