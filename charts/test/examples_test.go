package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	giev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The release name and namespace the examples' comments install with.
const exampleRelease, exampleNamespace = "dualmap", "llm"

// destinationRule is the part of Istio's DestinationRule the examples use
// (Istio's Go API is not worth its dependencies here): strict all the same.
type destinationRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Host          string `json:"host"`
		TrafficPolicy struct {
			TLS struct {
				Mode               string `json:"mode"`
				InsecureSkipVerify bool   `json:"insecureSkipVerify"`
			} `json:"tls"`
		} `json:"trafficPolicy"`
	} `json:"spec"`
}

func decodeExample(doc []byte) (any, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return nil, err
	}
	var o any
	switch tm.APIVersion + " " + tm.Kind {
	case "gateway.networking.k8s.io/v1 GatewayClass":
		o = &gwv1.GatewayClass{}
	case "gateway.networking.k8s.io/v1 Gateway":
		o = &gwv1.Gateway{}
	case "gateway.networking.k8s.io/v1 HTTPRoute":
		o = &gwv1.HTTPRoute{}
	case "networking.istio.io/v1 DestinationRule":
		o = &destinationRule{}
	default:
		return nil, fmt.Errorf("no API type for %s %s", tm.APIVersion, tm.Kind)
	}
	strict, err := k8sjson.UnmarshalStrict(j, o, k8sjson.DisallowDuplicateFields, k8sjson.DisallowUnknownFields)
	if err == nil && len(strict) > 0 {
		err = fmt.Errorf("%v", strict)
	}
	return o, err
}

// TestChartExamples renders the chart with each example values file, loads
// its config, and decodes the gateway examples strictly: their HTTPRoutes
// must name the InferencePool the chart renders, and Istio's
// DestinationRule the picker's Service.
func TestChartExamples(t *testing.T) {
	c := loadChart(t)
	rendered := map[string][]object{}
	vfiles, _ := filepath.Glob(filepath.Join(chartDir, "examples/values-*.yaml"))
	if len(vfiles) < 2 {
		t.Fatalf("example values files: %v", vfiles)
	}
	for _, f := range vfiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		vals := map[string]any{}
		if err := yaml.UnmarshalStrict(b, &vals); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		manifest, _, err := renderAs(c, vals, exampleRelease)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs, err := decodeAll(manifest)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		dep, ok := find[*appsv1.Deployment](objs, exampleRelease)
		if !ok {
			t.Fatalf("%s: no Deployment %s", f, exampleRelease)
		}
		cm, _ := find[*corev1.ConfigMap](objs, exampleRelease)
		loadRenderedConfig(t, cm.Data["dualmap.yaml"], dep.Spec.Template.Spec, dep.Spec.Template.Spec.Containers[0], objs)
		rendered[filepath.Base(f)] = objs
	}
	pool, ok := find[*giev1.InferencePool](rendered["values-inferencepool.yaml"], exampleRelease)
	if !ok {
		t.Fatal("values-inferencepool.yaml renders no InferencePool named " + exampleRelease)
	}
	gfiles, _ := filepath.Glob(filepath.Join(chartDir, "examples/gateway-*.yaml"))
	if len(gfiles) < 3 {
		t.Fatalf("gateway examples: %v", gfiles)
	}
	for _, f := range gfiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		routes := 0
		for _, doc := range docSep.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			o, err := decodeExample([]byte(doc))
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			switch o := o.(type) {
			case *gwv1.HTTPRoute:
				for _, r := range o.Spec.Rules {
					for _, br := range r.BackendRefs {
						routes++
						if br.Group == nil || string(*br.Group) != giev1.GroupName || br.Kind == nil || *br.Kind != "InferencePool" || string(br.Name) != pool.Name {
							t.Errorf("%s: backendRef %+v is not the InferencePool %s", f, br.BackendObjectReference, pool.Name)
						}
					}
				}
			case *destinationRule:
				want := fmt.Sprintf("%s.%s.svc.cluster.local", string(pool.Spec.EndpointPickerRef.Name), exampleNamespace)
				if o.Spec.Host != want {
					t.Errorf("%s: DestinationRule host %s, want the picker's Service %s", f, o.Spec.Host, want)
				}
			}
		}
		if routes == 0 {
			t.Errorf("%s: no HTTPRoute to the pool", f)
		}
	}
}
