// Package kubernetes checks the manifests of contrib/kubernetes: each document decodes strictly
// (no unknown or misspelled field) into its Kubernetes API type, the DaemonSet's SHUFFLED_*
// environment configures a daemon that validates (every variable one the daemon reads), and the
// DaemonSet and the executor pod template agree on the socket, the local dirs, the user and the
// serving port. It is a module of its own so that the daemon's module needs no Kubernetes
// packages: run it with `cd contrib/kubernetes && go test ./...`.
package kubernetes

import (
	"bytes"
	"flag"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/shuffled/shuffled/server"
)

// documents splits a multi-document YAML file.
func documents(t *testing.T, file string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range bytes.Split(raw, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// decode strictly decodes doc into out, after checking its apiVersion and kind.
func decode(t *testing.T, file string, doc []byte, apiVersion, kind string, out any) {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if tm.APIVersion != apiVersion || tm.Kind != kind {
		t.Fatalf("%s: a %s %s, want %s %s", file, tm.APIVersion, tm.Kind, apiVersion, kind)
	}
	if err := yaml.UnmarshalStrict(doc, out); err != nil {
		t.Fatalf("%s: %s does not decode strictly: %v", file, kind, err)
	}
}

type manifests struct {
	ns       corev1.Namespace
	ds       appsv1.DaemonSet
	executor corev1.Pod
}

func load(t *testing.T) manifests {
	var m manifests
	docs := documents(t, "shuffled-daemonset.yaml")
	if len(docs) != 2 {
		t.Fatalf("shuffled-daemonset.yaml: %d documents, want a Namespace and a DaemonSet", len(docs))
	}
	decode(t, "shuffled-daemonset.yaml", docs[0], "v1", "Namespace", &m.ns)
	decode(t, "shuffled-daemonset.yaml", docs[1], "apps/v1", "DaemonSet", &m.ds)
	docs = documents(t, "executor-pod-template.yaml")
	if len(docs) != 1 {
		t.Fatalf("executor-pod-template.yaml: %d documents, want one Pod", len(docs))
	}
	decode(t, "executor-pod-template.yaml", docs[0], "v1", "Pod", &m.executor)
	return m
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// hostPaths maps each mount path of c to the host path of its hostPath volume, and checks that
// every mount names a volume of the pod.
func hostPaths(t *testing.T, spec corev1.PodSpec, c corev1.Container) map[string]string {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Errorf("container %s mounts %q, which is no volume of the pod", c.Name, m.Name)
			continue
		}
		if v.HostPath != nil {
			out[m.MountPath] = v.HostPath.Path
		}
	}
	return out
}

// sampleHostIP stands for status.hostIP, which the kubelet fills in.
const sampleHostIP = "10.0.0.5"

// daemonEnv is the DaemonSet's SHUFFLED_* environment as the daemon sees it.
func daemonEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP":
			env[e.Name] = sampleHostIP
		default:
			t.Errorf("env %s: a valueFrom this test does not know", e.Name)
		}
	}
	return env
}

func TestDaemonSetConfiguresAValidDaemon(t *testing.T) {
	m := load(t)
	spec := m.ds.Spec.Template.Spec
	if m.ds.Namespace != m.ns.Name {
		t.Errorf("DaemonSet in namespace %q, the Namespace is %q", m.ds.Namespace, m.ns.Name)
	}
	sel, err := metav1.LabelSelectorAsMap(m.ds.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sel {
		if m.ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template's labels %v", k, v, m.ds.Spec.Template.Labels)
		}
	}
	c := container(t, spec, "shuffled")
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q, want serve first", c.Args)
	}
	env := daemonEnv(t, c)

	// Every SHUFFLED_* variable is one the daemon reads, and together they validate.
	var cfg server.Config
	known := flag.NewFlagSet("known", flag.ContinueOnError)
	cfg.BindFlags(known)
	names := map[string]bool{}
	known.VisitAll(func(f *flag.Flag) {
		names["SHUFFLED_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))] = true
	})
	for name := range env {
		if strings.HasPrefix(name, "SHUFFLED_") && !names[name] {
			t.Errorf("env %s: the daemon reads no such variable", name)
		}
	}
	var loaded server.Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := loaded.Load(fs, c.Args[1:], lookup); err != nil {
		t.Fatalf("the DaemonSet's daemon configuration does not validate: %v", err)
	}

	mounts := hostPaths(t, spec, c)
	// The socket's directory is a hostPath mount.
	sockDir := path.Dir(env["SHUFFLED_SOCKET"])
	if mounts[sockDir] == "" {
		t.Errorf("SHUFFLED_SOCKET %s: its dir is no hostPath mount (%v)", env["SHUFFLED_SOCKET"], mounts)
	}
	for _, r := range strings.Split(env["SHUFFLED_ROOT"], ",") {
		if mounts[r] == "" {
			t.Errorf("SHUFFLED_ROOT %s is no hostPath mount (%v)", r, mounts)
		}
	}
	for _, r := range strings.Split(env["SHUFFLED_ALLOWED_ROOTS"], ",") {
		if mounts[r] == "" {
			t.Errorf("SHUFFLED_ALLOWED_ROOTS %s is no hostPath mount (%v)", r, mounts)
		}
	}

	// Serving: on the node's port, advertising the node's IP.
	host, port, err := net.SplitHostPort(env["SHUFFLED_SERVE_ADDR"])
	if err != nil {
		t.Fatalf("SHUFFLED_SERVE_ADDR: %v", err)
	}
	if host != "0.0.0.0" && host != "" {
		t.Errorf("SHUFFLED_SERVE_ADDR %s: want every address of the pod, for the hostPort", env["SHUFFLED_SERVE_ADDR"])
	}
	if env["SHUFFLED_SERVE_ADVERTISE_HOST"] != sampleHostIP {
		t.Errorf("SHUFFLED_SERVE_ADVERTISE_HOST: want the downward API's status.hostIP")
	}
	p, _ := strconv.Atoi(port)
	served := false
	for _, cp := range c.Ports {
		if int(cp.ContainerPort) == p {
			served = cp.HostPort == cp.ContainerPort && cp.Protocol == corev1.ProtocolTCP
		}
	}
	if !served && !spec.HostNetwork {
		t.Errorf("serving port %d is not exposed on the node as the same hostPort (TCP): %v", p, c.Ports)
	}
	_, mport, _ := net.SplitHostPort(env["SHUFFLED_METRICS_ADDR"])
	for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("container shuffled: want HTTP readiness and liveness probes")
			continue
		}
		found := false
		for _, cp := range c.Ports {
			if cp.Name == probe.HTTPGet.Port.String() && strconv.Itoa(int(cp.ContainerPort)) == mport {
				found = true
			}
		}
		if !found {
			t.Errorf("probe %s on port %q: no container port of that name at the metrics port %s", probe.HTTPGet.Path, probe.HTTPGet.Port.String(), mport)
		}
	}
	if g := m.ds.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= int64(loaded.DrainTimeout.Seconds()) {
		t.Errorf("terminationGracePeriodSeconds %v: want more than the drain timeout %v", g, loaded.DrainTimeout)
	}
}

func TestExecutorTemplateMatchesTheDaemonSet(t *testing.T) {
	m := load(t)
	dspec := m.ds.Spec.Template.Spec
	d := container(t, dspec, "shuffled")
	env := daemonEnv(t, d)
	daemonMounts := hostPaths(t, dspec, d)

	espec := m.executor.Spec
	if len(espec.Containers) == 0 {
		t.Fatal("the executor template has no container (Spark takes the first)")
	}
	e := espec.Containers[0]
	execMounts := hostPaths(t, espec, e)

	// The socket: the same host dir, at the dir of SHUFFLED_SOCKET.
	sockDir := path.Dir(env["SHUFFLED_SOCKET"])
	if execMounts[sockDir] == "" || execMounts[sockDir] != daemonMounts[sockDir] {
		t.Errorf("executor mounts host %q at %s, the daemon's socket dir is host %q", execMounts[sockDir], sockDir, daemonMounts[sockDir])
	}
	// Spark's local dir: a spark-local-dir-* volume, at the same path and host path as an
	// allowed root of the daemon, so the dirs the executor registers are the daemon's too.
	local := ""
	for _, vm := range e.VolumeMounts {
		if strings.HasPrefix(vm.Name, "spark-local-dir-") {
			local = vm.MountPath
		}
	}
	if local == "" {
		t.Fatal("the executor template mounts no spark-local-dir-* volume (Spark's local dirs)")
	}
	allowed := false
	for _, r := range strings.Split(env["SHUFFLED_ALLOWED_ROOTS"], ",") {
		if r == local && daemonMounts[r] != "" && daemonMounts[r] == execMounts[local] {
			allowed = true
		}
	}
	if !allowed {
		t.Errorf("the executor's local dir %s (host %q) is not an allowed root the daemon mounts at the same path (%v, %v)",
			local, execMounts[local], env["SHUFFLED_ALLOWED_ROOTS"], daemonMounts)
	}
	// One user: the daemon's own user may always connect, and both write the local dirs.
	du := dspec.SecurityContext.RunAsUser
	eu := espec.SecurityContext.RunAsUser
	if du == nil || eu == nil || *du != *eu {
		t.Errorf("runAsUser: daemon %v, executors %v: want one user", du, eu)
	}
}
