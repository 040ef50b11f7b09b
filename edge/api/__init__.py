"""lakeFS's REST API on the edge's port. Its responses are lakefs-sdk's models, loaded without
the rest of lakefs-sdk (sdk_models.py): before any module of this package imports them."""

from edge.api.sdk_models import load_models_alone

load_models_alone()
