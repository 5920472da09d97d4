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
// it is for and the flag that moves it.
func bind(port int, what, flag string) (net.Listener, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("local: %s for %s is in use (%w): is another make local-up running? Stop it (Ctrl-C), or give this one other ports: "+
			"go run ./cmd/local up -url-port 0 -lambda-port 0 -dashboard-port 0 (0 = any free port; %s moves this one)", addr, what, err, flag)
	}
	return ln, nil
}

// PortsFree fails as Up would, naming the port, when a fixed one it is
// given is taken: urlPort (the first function URL's), lambdaPort,
// dashboardPort, each skipped when 0 (any free port) or -1 (none). A
// caller checks it before finding a stand-in, so a second make local-up
// beside a running one stops there; Up binds them for good.
func PortsFree(urlPort, lambdaPort, dashboardPort int) error {
	for _, c := range []struct {
		port       int
		what, flag string
	}{{urlPort, "the first function URL", "-url-port"}, {lambdaPort, "the Lambda Invoke API", "-lambda-port"}, {dashboardPort, "the dashboard", "-dashboard-port"}} {
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
// DashboardPort (when not -1; 0 is any free port). A port in use is an
// error naming it, what it is for and the flag that moves it.
func reservePorts(tpl *template.Template, opts Options) (_ *listeners, err error) {
	l := &listeners{}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if opts.URLPort != 0 {
		n := 0
		for _, r := range tpl.Resources {
			if r.Type == "AWS::Lambda::Url" {
				n++
			}
		}
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
