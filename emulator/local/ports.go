package local

import (
	"fmt"
	"net"
	"strconv"

	"github.com/tributary-dev/tributary/emulator/template"
)

// listeners are the ports Up serves on, bound before it deploys anything:
// a second make local-up beside a running one finds that one's stand-in
// and reuses it, and would otherwise deploy a stack onto it and start every
// function before finding its ports taken.
type listeners struct {
	urls      []net.Listener // function URLs, from Options.URLPort on (nil: free ports)
	lambda    net.Listener   // the Lambda Invoke API (nil: none served)
	dashboard net.Listener   // the dashboard page (nil: none served)
}

// bind listens on 127.0.0.1:port; a port in use is an error naming it, what
// it is for and the flag that moves it, passed through make local-up: make
// builds and synthesizes what changed first, where go run ./cmd/local up
// runs whatever template was synthesized last.
func bind(port int, what, flag string) (net.Listener, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("local: %s for %s is in use (%w): is another make local-up running? Stop it (Ctrl-C), or give this one other ports: "+
			"make local-up LOCAL_FLAGS='-url-port 0 -lambda-port 0 -dashboard-port 0' (0 = any free port; %s moves this one)", addr, what, err, flag)
	}
	return ln, nil
}

// PortsError is a mistake in the ports asked for themselves (a port out of
// range, two settings on one port), as against a port that something else
// holds: the caller's usage error, named by its flags.
type PortsError struct{ Msg string }

func (e *PortsError) Error() string { return "local: " + e.Msg }

// checkPorts checks the ports asked for before any is bound, for a stack
// of urls function URLs: each in range, and no two settings on one port.
// Without it a port past 65535 was reported as in use, and -lambda-port
// on one of the function URLs' ports (-url-port 9100 serves 9100, 9101, …)
// as another make local-up holding it.
func checkPorts(urls, urlPort, lambdaPort, dashboardPort int) error {
	if urlPort != 0 && (urlPort < 0 || urlPort+max(urls, 1)-1 > 65535) {
		return &PortsError{fmt.Sprintf("-url-port %d: want the first of %d ports from 1 to 65535 (the stack has %d function URLs, on -url-port and the ports after it), or 0 for any free ports", urlPort, max(urls, 1), urls)}
	}
	for _, c := range []struct {
		flag string
		port int
	}{{"-lambda-port", lambdaPort}, {"-dashboard-port", dashboardPort}} {
		if c.port < -1 || c.port > 65535 {
			return &PortsError{fmt.Sprintf("%s %d: want a port from 1 to 65535, or 0 for any free port", c.flag, c.port)}
		}
		if urlPort > 0 && c.port >= urlPort && c.port < urlPort+urls {
			return &PortsError{fmt.Sprintf("%s %d and -url-port %d ask for the same port: -url-port %d serves the stack's %d function URLs on ports %d to %d, and %d is function URL %d's; give %s a port outside them, or -url-port another first port",
				c.flag, c.port, urlPort, urlPort, urls, urlPort, urlPort+urls-1, c.port, c.port-urlPort+1, c.flag)}
		}
	}
	if lambdaPort > 0 && lambdaPort == dashboardPort {
		return &PortsError{fmt.Sprintf("-lambda-port %d and -dashboard-port %d ask for the same port: give them two", lambdaPort, dashboardPort)}
	}
	return nil
}

// functionURLs is how many function URLs tpl declares, each served on a
// port of its own.
func functionURLs(tpl *template.Template) int {
	n := 0
	for _, r := range tpl.Resources {
		if r.Type == "AWS::Lambda::Url" {
			n++
		}
	}
	return n
}

// PortsFree fails as Up would, before anything is started, when the ports
// asked for cannot be served for the stack of templatePath: a
// *PortsError when they are out of range or two settings ask for one
// port, else an error naming the port taken and the flag that moves it.
// urlPort is the first function URL's port (the others follow it),
// lambdaPort and dashboardPort the others, each skipped when 0 (any free
// port) or -1 (none). A caller checks it before finding a stand-in, so a
// second make local-up beside a running one stops there; Up binds them
// for good.
func PortsFree(templatePath string, urlPort, lambdaPort, dashboardPort int) error {
	tpl, err := template.Load(templatePath)
	if err != nil {
		return fmt.Errorf("local: %w (run `make synth-local` to produce it)", err)
	}
	urls := functionURLs(tpl)
	if err := checkPorts(urls, urlPort, lambdaPort, dashboardPort); err != nil {
		return err
	}
	type check struct {
		port       int
		what, flag string
	}
	var checks []check
	for i := 0; urlPort > 0 && i < urls; i++ {
		checks = append(checks, check{urlPort + i, fmt.Sprintf("function URL %d of %d", i+1, urls), "-url-port"})
	}
	checks = append(checks, check{lambdaPort, "the Lambda Invoke API", "-lambda-port"}, check{dashboardPort, "the dashboard", "-dashboard-port"})
	for _, c := range checks {
		if c.port <= 0 {
			continue
		}
		ln, err := bind(c.port, c.what, c.flag)
		if err != nil {
			return err
		}
		ln.Close()
	}
	return nil
}

// reservePorts binds what opts asks for on 127.0.0.1: a port from URLPort
// on for each function URL of tpl (when URLPort is not 0), LambdaPort and
// DashboardPort (when not -1; 0 is any free port). Ports out of range or
// asked for twice are a *PortsError; a port in use is an error naming it,
// what it is for and the flag that moves it.
func reservePorts(tpl *template.Template, opts Options) (_ *listeners, err error) {
	n := functionURLs(tpl)
	if err := checkPorts(n, opts.URLPort, opts.LambdaPort, opts.DashboardPort); err != nil {
		return nil, err
	}
	l := &listeners{}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if opts.URLPort != 0 {
		for i := 0; i < n; i++ {
			ln, err := bind(opts.URLPort+i, fmt.Sprintf("function URL %d of %d", i+1, n), "-url-port")
			if err != nil {
				return nil, err
			}
			l.urls = append(l.urls, ln)
		}
	}
	if opts.LambdaPort >= 0 {
		if l.lambda, err = bind(opts.LambdaPort, "the Lambda Invoke API", "-lambda-port"); err != nil {
			return nil, err
		}
	}
	if opts.DashboardPort >= 0 {
		if l.dashboard, err = bind(opts.DashboardPort, "the dashboard", "-dashboard-port"); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// url is the listener for the i-th function URL: the reserved one, or a
// free port.
func (l *listeners) url(i int) (net.Listener, error) {
	if i < len(l.urls) {
		ln := l.urls[i]
		l.urls[i] = nil
		return ln, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("local: a free port for a function URL: %w", err)
	}
	return ln, nil
}

// close closes every listener not handed to a server.
func (l *listeners) close() {
	for _, ln := range l.urls {
		if ln != nil {
			ln.Close()
		}
	}
	if l.lambda != nil {
		l.lambda.Close()
	}
	if l.dashboard != nil {
		l.dashboard.Close()
	}
}
