import sys

from devtools.kube_podman.run import main

sys.exit(main())
