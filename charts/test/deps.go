package charttest

import (
	_ "helm.sh/helm/v3/pkg/action"
	_ "k8s.io/api/apps/v1"
	_ "sigs.k8s.io/gateway-api-inference-extension/api/v1"
)
