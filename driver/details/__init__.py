"""The typed `adapter_detail` of each bundled app, published in `schema operation-result`:
common.py what both give, slurm.py and open_ondemand.py each app's part."""
