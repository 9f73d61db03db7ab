// Command order-service is the demo backend of packs/orders.yaml: an HTTP endpoint that
// packs/tools.yaml binds the track_order tool to. It answers POST /track_order with the
// order as JSON and logs each call with the headers wop sends (Idempotency-Key, the run
// and the call).
//
//	go run ./examples/order-service            # listens on 127.0.0.1:8099
//	go run ./examples/order-service -addr :9000
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"time"
)

// orders is the shop's order book.
var orders = map[string]map[string]string{
	"ORD-1042": {"order_id": "ORD-1042", "status": "shipped", "carrier": "DHL", "tracking": "JD014600006281", "eta": "in 2 days"},
	"ORD-2001": {"order_id": "ORD-2001", "status": "processing", "eta": "ships tomorrow"},
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8099", "listen `address`")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /track_order", func(w http.ResponseWriter, r *http.Request) {
		var args struct {
			OrderID string `json:"order_id"`
		}
		err := json.NewDecoder(r.Body).Decode(&args)
		log.Printf("track_order %q run=%s call=%s attempt=%s key=%s", args.OrderID,
			r.Header.Get("Wop-Run-Id"), r.Header.Get("Wop-Tool-Call-Id"), r.Header.Get("Wop-Attempt"), r.Header.Get("Idempotency-Key"))
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "the body must be {\"order_id\": \"ORD-1042\"}"})
			return
		}
		order, ok := orders[args.OrderID]
		if !ok {
			// A 404 reaches the model as an error result it can explain to the customer.
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "no order " + args.OrderID})
			return
		}
		_ = json.NewEncoder(w).Encode(order)
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("order service on http://%s (POST /track_order)", *addr)
	log.Fatal(srv.ListenAndServe())
}
