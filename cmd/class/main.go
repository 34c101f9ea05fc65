// Command class runs the metallb-iad class controller.
package main

import (
	"os"

	"github.com/cozystack/metallb-iad/controllers/class"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() { os.Exit(bootstrap.Main(class.Controller)) }
