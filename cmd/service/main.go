// Command service runs the metallb-iad service controller.
package main

import (
	"os"

	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() { os.Exit(bootstrap.Main(service.Controller)) }
