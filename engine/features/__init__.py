"""What the engine offers above its core: branch protection, pull requests, repositories'
lifecycle (create, delete, dump, restore), retention and last access for GC, imports, and the
history events of each repository."""
