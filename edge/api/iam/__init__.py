"""lakeFS's IAM over auth: calls made for the request's caller (calls.py), auth's messages as
lakefs-sdk models (models.py), lakeFS's prefix paging over auth's id paging (paging.py), and
policies translated between lakeFS's vocabulary and Silt's (policies.py)."""
