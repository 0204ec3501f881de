package charttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	giev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dualmap/dualmap/internal/config"
	"github.com/dualmap/dualmap/internal/extproc"
)

// object is one rendered manifest document, decoded into its API type.
type object struct {
	source string // the template (# Source: line)
	kind   string
	name   string
	obj    any
}

// newObject returns the API type for apiVersion and kind; an object the
// chart renders must have one here, so a new kind needs a decision.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "inference.networking.k8s.io/v1 InferencePool":
		return &giev1.InferencePool{}, nil
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, nil
	}
	return nil, fmt.Errorf("no API type for %s %s", apiVersion, kind)
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeAll splits a manifest and decodes each document strictly: unknown
// or duplicate fields, and fields of the wrong type, are errors.
func decodeAll(manifest string) ([]object, error) {
	var out []object
	for _, doc := range docSep.Split(manifest, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		src := ""
		if m := regexp.MustCompile(`(?m)^# Source: (.*)$`).FindStringSubmatch(doc); m != nil {
			src = m[1]
		}
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		var tm metav1.TypeMeta
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		o, err := newObject(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		strict, err := k8sjson.UnmarshalStrict(j, o, k8sjson.DisallowDuplicateFields, k8sjson.DisallowUnknownFields)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", src, tm.Kind, err)
		}
		if len(strict) > 0 {
			return nil, fmt.Errorf("%s: %s: %v", src, tm.Kind, strict)
		}
		meta := o.(metav1.Object)
		if meta.GetName() == "" {
			return nil, fmt.Errorf("%s: %s without a name", src, tm.Kind)
		}
		out = append(out, object{source: src, kind: tm.Kind, name: meta.GetName(), obj: o})
	}
	return out, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func find[T any](objs []object, name string) (T, bool) {
	var zero T
	for _, o := range objs {
		if v, ok := o.obj.(T); ok && o.name == name {
			return v, true
		}
	}
	return zero, false
}

func count(objs []object, kind string) int {
	n := 0
	for _, o := range objs {
		if o.kind == kind {
			n++
		}
	}
	return n
}

// expect is what each value set must render.
type expect struct {
	replicas     int32
	backend      string // state.backend
	tlsMode      string // grpc.tls.mode
	pools        int
	envoy        bool
	pool         bool // an InferencePool
	pdb          bool
	redisTLS     bool
	redisPodWant bool
	monitor      bool
	dashboard    bool
	tracing      bool
}

var expects = map[string]expect{
	"defaults":               {replicas: 1, backend: "memory", tlsMode: "self-signed", pools: 1, envoy: true},
	"standalone-memory":      {replicas: 1, backend: "memory", tlsMode: "off", pools: 2, envoy: true},
	"replicas-bundled-redis": {replicas: 3, backend: "redis", tlsMode: "self-signed", pools: 1, envoy: true, pdb: true, redisPodWant: true, monitor: true, dashboard: true, tracing: true},
	"external-redis-tls":     {replicas: 2, backend: "redis", tlsMode: "files", pools: 1, pdb: true, redisTLS: true},
	"inline-tls":             {replicas: 1, backend: "redis", tlsMode: "files", pools: 1, redisTLS: true},
	"inferencepool":          {replicas: 2, backend: "redis", tlsMode: "self-signed", pools: 1, pool: true, pdb: true},
}

const full = releaseName + "-dualmap"

func checkObjects(t *testing.T, name string, objs []object) {
	want, ok := expects[name]
	if !ok {
		t.Fatalf("value set %s has no entry in expects", name)
	}
	dep, ok := find[*appsv1.Deployment](objs, full)
	if !ok {
		t.Fatalf("no Deployment %s", full)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want.replicas {
		t.Errorf("replicas = %v, want %d", dep.Spec.Replicas, want.replicas)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	checkProbes(t, ctr)
	checkSecurity(t, pod, ctr)
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Error("no pod anti-affinity")
	}
	svc, ok := find[*corev1.Service](objs, full)
	if !ok {
		t.Fatalf("no Service %s", full)
	}
	checkServiceMatches(t, svc, dep)

	cm, ok := find[*corev1.ConfigMap](objs, full)
	if !ok {
		t.Fatalf("no ConfigMap %s", full)
	}
	cfg := loadRenderedConfig(t, cm.Data["dualmap.yaml"], pod, ctr, objs)
	if cfg.State.Backend != want.backend {
		t.Errorf("state.backend = %q, want %q", cfg.State.Backend, want.backend)
	}
	if cfg.GRPC.TLS.Mode != want.tlsMode {
		t.Errorf("grpc.tls.mode = %q, want %q", cfg.GRPC.TLS.Mode, want.tlsMode)
	}
	if !cfg.GRPC.Health.Enabled {
		t.Error("grpc.health is off: the startup probe and gateways need it")
	}
	if len(cfg.Pools) != want.pools {
		t.Errorf("%d pools, want %d", len(cfg.Pools), want.pools)
	}
	if want.tracing != (cfg.Tracing.Endpoint != "") {
		t.Errorf("tracing.endpoint = %q", cfg.Tracing.Endpoint)
	}
	if want.redisTLS != cfg.State.Redis.TLS {
		t.Errorf("state.redis.tls = %v", cfg.State.Redis.TLS)
	}
	checkPorts(t, cfg, ctr, svc)

	if _, ok := find[*policyv1.PodDisruptionBudget](objs, full); ok != want.pdb {
		t.Errorf("PodDisruptionBudget rendered = %v, want %v", ok, want.pdb)
	}
	_, redisPod := find[*appsv1.Deployment](objs, full+"-redis")
	if redisPod != want.redisPodWant {
		t.Errorf("bundled Redis rendered = %v, want %v", redisPod, want.redisPodWant)
	}
	if got := count(objs, "ServiceMonitor") == 1; got != want.monitor {
		t.Errorf("ServiceMonitor rendered = %v, want %v", got, want.monitor)
	}
	dash, ok := find[*corev1.ConfigMap](objs, full+"-dashboard")
	if ok != want.dashboard {
		t.Errorf("dashboard rendered = %v, want %v", ok, want.dashboard)
	}
	if ok && !strings.Contains(dash.Data["dualmap.json"], `"panels"`) {
		t.Error("dashboard ConfigMap has no panels")
	}

	envoyCM, ok := find[*corev1.ConfigMap](objs, full+"-envoy")
	if ok != want.envoy {
		t.Errorf("Envoy front proxy rendered = %v, want %v", ok, want.envoy)
	}
	if ok {
		checkEnvoy(t, cfg, envoyCM.Data["envoy.yaml"])
	}
	ip, ok := find[*giev1.InferencePool](objs, full)
	if ok != want.pool {
		t.Errorf("InferencePool rendered = %v, want %v", ok, want.pool)
	}
	if ok {
		checkInferencePool(t, ip, svc, cfg, objs)
	}
}

func checkProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	switch {
	case c.StartupProbe == nil || c.StartupProbe.GRPC == nil:
		t.Error("startup probe is not gRPC health")
	case c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz":
		t.Error("liveness probe is not GET /healthz")
	case c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz":
		t.Error("readiness probe is not GET /readyz")
	}
}

func checkSecurity(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod may run as root")
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("root filesystem is writable")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Error("no resource requests")
	}
}

func checkServiceMatches(t *testing.T, svc *corev1.Service, dep *appsv1.Deployment) {
	t.Helper()
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the pods", k, v)
		}
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Deployment selector %s=%s does not match its pods", k, v)
		}
	}
}

// checkPorts: the config listens where the container and Service say.
func checkPorts(t *testing.T, cfg config.Config, c corev1.Container, svc *corev1.Service) {
	t.Helper()
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, x := range []struct{ listen, port string }{
		{cfg.Listen.GRPC, "grpc-ext-proc"},
		{cfg.GRPC.Health.Listen, "grpc-health"},
		{cfg.Listen.Admin, "http-admin"},
	} {
		if x.listen != fmt.Sprintf(":%d", ports[x.port]) {
			t.Errorf("config listens on %q, container port %s is %d", x.listen, x.port, ports[x.port])
		}
		found := false
		for _, sp := range svc.Spec.Ports {
			found = found || sp.Name == x.port && sp.TargetPort.StrVal == x.port
		}
		if !found {
			t.Errorf("Service has no port %s", x.port)
		}
	}
	if c.StartupProbe != nil && c.StartupProbe.GRPC != nil && fmt.Sprintf(":%d", c.StartupProbe.GRPC.Port) != cfg.GRPC.Health.Listen {
		t.Errorf("startup probe on %d, gRPC health on %s", c.StartupProbe.GRPC.Port, cfg.GRPC.Health.Listen)
	}
}

// loadRenderedConfig loads the config the chart wrote with the router's
// loader. Each file it names must lie in a volume the chart mounts in the
// router container, from a Secret or ConfigMap; the test writes stand-ins
// under a temporary root in place of the mount paths, so the loader reads
// real files: the content of the Secret or ConfigMap when the chart renders
// it, otherwise a stand-in (a fresh certificate and key, a password).
func loadRenderedConfig(t *testing.T, text string, pod corev1.PodSpec, c corev1.Container, objs []object) config.Config {
	t.Helper()
	root := t.TempDir()
	cert, key := selfSigned(t)
	paths := regexp.MustCompile(`/etc/dualmap/[A-Za-z0-9_./-]+`).FindAllString(text, -1)
	for _, p := range paths {
		rendered := checkMounted(t, p, pod, c, objs)
		local := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		var data []byte
		switch {
		case strings.HasSuffix(p, ".key"):
			data = key
		case strings.HasSuffix(p, ".crt"):
			data = cert
		case strings.HasSuffix(p, ".json"):
			data = []byte(`{"model":{"type":"BPE"}}`)
		default:
			data = []byte("secret\n")
		}
		if rendered != nil {
			data = rendered // the chart's own Secret: the loader checks the real PEM
		}
		if err := os.WriteFile(local, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	text = strings.ReplaceAll(text, "/etc/dualmap/", root+"/etc/dualmap/")
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			checkSecretRef(t, e.ValueFrom.SecretKeyRef, objs)
			env[e.Name] = "from-secret"
		}
	}
	cfg, err := config.Parse([]byte(text), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the chart's dualmap config does not load: %v\n%s", err, text)
	}
	// The loader defaults password_env; what the chart wrote must be set.
	if m := regexp.MustCompile(`password_env: (\S+)`).FindStringSubmatch(text); m != nil && env[m[1]] == "" {
		t.Errorf("state.redis.password_env %s is not set from a Secret in the container", m[1])
	}
	return cfg
}

// checkMounted: path p is in a volume mounted in the container, and a
// Secret or ConfigMap volume the chart renders has the key.
//
// It returns the file's content when the chart renders it (nil for a
// user's existing Secret or ConfigMap).
func checkMounted(t *testing.T, p string, pod corev1.PodSpec, c corev1.Container, objs []object) []byte {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if filepath.Dir(p) != m.MountPath {
			continue
		}
		file := filepath.Base(p)
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.Secret != nil:
				for _, it := range v.Secret.Items {
					if it.Path == file {
						file = it.Key
					}
				}
				if s, ok := find[*corev1.Secret](objs, v.Secret.SecretName); ok {
					d, ok := s.Data[file]
					if !ok {
						t.Errorf("%s: Secret %s has no key %s", p, s.Name, file)
					}
					return d
				}
			case v.ConfigMap != nil:
				if cm, ok := find[*corev1.ConfigMap](objs, v.ConfigMap.Name); ok {
					d, ok := cm.Data[file]
					if !ok {
						t.Errorf("%s: ConfigMap %s has no key %s", p, cm.Name, file)
					}
					return []byte(d)
				}
			}
			return nil
		}
		t.Errorf("%s: volume %s is not in the pod", p, m.Name)
		return nil
	}
	t.Errorf("the config names %s, which is in no volume mounted in the router container", p)
	return nil
}

// checkSecretRef: a Secret the chart renders has the key; otherwise the
// user's existing Secret is named.
func checkSecretRef(t *testing.T, ref *corev1.SecretKeySelector, objs []object) {
	t.Helper()
	if s, ok := find[*corev1.Secret](objs, ref.Name); ok {
		if _, ok := s.Data[ref.Key]; !ok {
			t.Errorf("Secret %s has no key %s", ref.Name, ref.Key)
		}
	}
	if ref.Name == "" || ref.Key == "" {
		t.Errorf("secretKeyRef without name or key: %+v", ref)
	}
}

func checkInferencePool(t *testing.T, ip *giev1.InferencePool, svc *corev1.Service, cfg config.Config, objs []object) {
	t.Helper()
	ref := ip.Spec.EndpointPickerRef
	if ref.Group == nil || *ref.Group != "" || ref.Kind != "Service" || string(ref.Name) != svc.Name {
		t.Errorf("endpointPickerRef = %+v, want the core Service %s", ref, svc.Name)
	}
	if ref.Port == nil || fmt.Sprintf(":%d", ref.Port.Number) != cfg.Listen.GRPC {
		t.Errorf("endpointPickerRef.port = %+v, dualmap listens on %s", ref.Port, cfg.Listen.GRPC)
	}
	if ref.FailureMode != giev1.EndpointPickerFailOpen && ref.FailureMode != giev1.EndpointPickerFailClose {
		t.Errorf("failureMode = %q", ref.FailureMode)
	}
	if len(ip.Spec.TargetPorts) == 0 || len(ip.Spec.Selector.MatchLabels) == 0 {
		t.Fatalf("InferencePool without targetPorts or selector: %+v", ip.Spec)
	}
	if cfg.Routing.Mode != config.ModeOriginalDst || cfg.Routing.Header != "x-gateway-destination-endpoint" {
		t.Errorf("routing = %+v, want the endpoint picker's single-endpoint mode", cfg.Routing)
	}
	// dualmap finds the pool's pods through the headless Service on the
	// pool's selector, at the first target port.
	p := cfg.Pools[0]
	if p.DNS == nil || int32(p.DNS.Port) != int32(ip.Spec.TargetPorts[0].Number) {
		t.Fatalf("pool %s discovers %+v, want DNS on target port %d", p.Name, p.DNS, ip.Spec.TargetPorts[0].Number)
	}
	host := strings.SplitN(p.DNS.Name, ".", 2)[0]
	hs, ok := find[*corev1.Service](objs, host)
	if !ok {
		t.Fatalf("pools[0].dns.name %s: no such Service rendered", p.DNS.Name)
	}
	if hs.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s is not headless", hs.Name)
	}
	if len(hs.Spec.Selector) != len(ip.Spec.Selector.MatchLabels) {
		t.Errorf("headless Service selector %v, pool selector %v", hs.Spec.Selector, ip.Spec.Selector.MatchLabels)
	}
	for k, v := range ip.Spec.Selector.MatchLabels {
		if hs.Spec.Selector[string(k)] != string(v) {
			t.Errorf("headless Service selector %v, pool selector %v", hs.Spec.Selector, ip.Spec.Selector.MatchLabels)
		}
	}
	if !strings.HasSuffix(p.DNS.Name, "."+namespace+".svc.cluster.local") {
		t.Errorf("pools[0].dns.name %s is not fully qualified in %s", p.DNS.Name, namespace)
	}
}

// checkEnvoy decodes the front proxy's config strictly as an Envoy
// bootstrap, checks its dualmap route settings with dualmap's own checker
// and that every model server dualmap may pick is an Envoy endpoint.
func checkEnvoy(t *testing.T, cfg config.Config, text string) {
	t.Helper()
	if err := decodeBootstrap(text); err != nil {
		t.Fatalf("Envoy config: %v", err)
	}
	n, unknown, err := extproc.CheckEnvoyRouteSettings(cfg, []byte(text))
	if err != nil || len(unknown) > 0 || n == 0 {
		t.Errorf("Envoy route settings: %d found, unknown %v, err %v", n, unknown, err)
	}
	for _, p := range cfg.Pools {
		var want []string
		for _, in := range p.Instances {
			h, port, _ := strings.Cut(in.Address, ":")
			want = append(want, fmt.Sprintf("address: %s, port_value: %s}", h, port))
		}
		if p.DNS != nil {
			want = append(want, fmt.Sprintf("address: %s, port_value: %d}", p.DNS.Name, p.DNS.Port))
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("pool %s: %q is not a model_servers endpoint", p.Name, w)
			}
		}
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "charttest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, DNSNames: []string{"charttest"},
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}
