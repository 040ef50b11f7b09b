"""Auth: users, groups, policies and credentials on KV; authorizes every request."""
