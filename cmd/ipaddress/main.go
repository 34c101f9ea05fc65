// Command ipaddress runs the metallb-iad ipaddress controller.
package main

import (
	"os"

	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() { os.Exit(bootstrap.Main(ipaddress.Controller)) }
