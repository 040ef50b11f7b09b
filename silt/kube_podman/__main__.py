import sys

from silt.kube_podman.run import main

sys.exit(main())
