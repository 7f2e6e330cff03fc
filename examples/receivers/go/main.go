// A Partner Platform webhook receiver on Go's net/http.
//
// Run:  WEBHOOK_SECRET=... PORT=8080 go run .
// It verifies X-Service-Signature over the raw body bytes before decoding anything, answers 204 at
// once, and hands each new event (deduplicated by its id) to a worker goroutine.
package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
)

// docs:verify:start
var (
	ErrMissingSecret      = errors.New("missing-secret")
	ErrMissingSignature   = errors.New("missing-signature")
	ErrMalformedSignature = errors.New("malformed-signature")
	ErrSignatureMismatch  = errors.New("signature-mismatch")
	signaturePattern      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Verify returns nil when header signs the raw body, else why not.
func Verify(body []byte, header string, secret string) error {
	if secret == "" { // an unset secret would make anyone's signature valid
		return ErrMissingSecret
	}
	if header == "" {
		return ErrMissingSignature
	}
	if !signaturePattern.MatchString(header) { // 64 lowercase hex digits, no "sha256=" prefix
		return ErrMalformedSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	expected := []byte(hex.EncodeToString(mac.Sum(nil)))
	if !hmac.Equal(expected, []byte(header)) { // constant time
		return ErrSignatureMismatch
	}
	return nil
}

// docs:verify:end

const maxBytes = 1 << 20

type Event struct {
	ID    string          `json:"id"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

type receiver struct {
	secret string
	mu     sync.Mutex
	seen   map[string]bool // use your database (a unique key on the event id) in production
	events chan Event
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		problem(w, http.StatusMethodNotAllowed, "Method not allowed", "")
		return
	}
	// docs:raw-body:start
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes)) // the exact bytes received
	if err != nil {
		problem(w, http.StatusRequestEntityTooLarge, "Payload too large", "")
		return
	}
	// Every line of the header, joined as HTTP reads them (RFC 9110 §5.3): two signatures are none.
	signature := strings.Join(r.Header.Values("X-Service-Signature"), ", ")
	if err := Verify(body, signature, rc.secret); err != nil {
		problem(w, http.StatusUnauthorized, "Invalid signature", err.Error())
		return
	}
	// docs:raw-body:end
	var event Event
	if err := json.Unmarshal(body, &event); err != nil || event.ID == "" {
		problem(w, http.StatusBadRequest, "Invalid event", "not a JSON object with an id")
		return
	}
	rc.mu.Lock()
	duplicate := rc.seen[event.ID]
	rc.seen[event.ID] = true
	rc.mu.Unlock()
	if !duplicate { // a retry of a handled event is acknowledged again, and ignored
		select {
		case rc.events <- event:
		default: // the queue is full: forget the id and refuse, so that the service retries later
			rc.mu.Lock()
			delete(rc.seen, event.ID)
			rc.mu.Unlock()
			problem(w, http.StatusServiceUnavailable, "Busy", "")
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
}

// checkVectors is used by the package's tests: one line per vector on stdin (id, then base64 secret,
// body and header, "-" for no header), one line "id<TAB>valid|reason" out.
func checkVectors() {
	decode := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			log.Fatal(err)
		}
		return b
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		f := strings.Split(scanner.Text(), "\t")
		header := ""
		if f[3] != "-" {
			header = string(decode(f[3]))
		}
		result := "valid"
		if err := Verify(decode(f[2]), header, string(decode(f[1]))); err != nil {
			result = err.Error()
		}
		fmt.Printf("%s\t%s\n", f[0], result)
	}
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "vectors" {
		checkVectors()
		return
	}
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" {
		log.Fatal("receiver: set WEBHOOK_SECRET to the webhook's secret")
	}
	rc := &receiver{secret: secret, seen: map[string]bool{}, events: make(chan Event, 1000)}
	go func() {
		for event := range rc.events {
			log.Printf("received %s %s", event.Event, event.ID) // your handling here
		}
	}()
	host, port := os.Getenv("HOST"), os.Getenv("PORT")
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.Handle("/webhooks/partner-platform", rc)
	addr := host + ":" + port
	fmt.Printf("listening on http://%s/webhooks/partner-platform\n", addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
