"""gRPC plumbing shared by every service: server construction and error mapping."""
