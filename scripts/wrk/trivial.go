//go:build ignore

// trivial is the yardstick for the grab endpoint's wrk figures: the cheapest useful net/http
// server, answering every request with a constant 202 JSON body of the grab's size.
//
//	go run scripts/wrk/trivial.go -addr 127.0.0.1:18081
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	flag.Parse()
	body := []byte(`{"status":"QUEUED","order_token":"gaaaaaaaaaaaaaaaaaaaaaaaa","amount_cents":100}` + "\n")
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		w.Write(body)
	})))
}
