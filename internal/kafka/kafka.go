// Package kafka is the Kafka sink of the order events: one record an event on a topic, keyed by
// the order's token (so that an order's events share a partition, in the order the relay sends
// them: one after the other), from franz-go's idempotent producer (a retried produce is written
// once).
package kafka

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"seckill/internal/relay"
	"seckill/internal/sale"
)

// The headers of a record, besides its value (the event's JSON, as a webhook's body).
const (
	HeaderEventID   = "seckill-event-id"
	HeaderEventType = "seckill-event-type"
)

// Timeout bounds one produce: a cluster slower than this failed the delivery.
const Timeout = 10 * time.Second

// Sink produces events to one topic.
type Sink struct {
	topic string
	cl    *kgo.Client
}

var _ relay.Sink = (*Sink)(nil)

// New returns a Sink producing to topic on the cluster of the seed brokers (host:port). It does
// not wait for the cluster: the relay's first delivery does.
func New(brokers []string, topic string, opts ...kgo.Opt) (*Sink, error) {
	if err := Check(brokers, topic); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(Timeout), kgo.RecordDeliveryTimeout(Timeout)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: Kafka: %v", sale.ErrInvalid, err)
	}
	return &Sink{topic: topic, cl: cl}, nil
}

// Check reports seed brokers or a topic that cannot name a sink: none, or a name Kafka refuses.
func Check(brokers []string, topic string) error {
	switch {
	case len(brokers) == 0:
		return fmt.Errorf("%w: Kafka: no brokers", sale.ErrInvalid)
	case topic == "" || len(topic) > 249 || strings.ContainsFunc(topic, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}):
		return fmt.Errorf("%w: Kafka topic %q: 1 to 249 of a-z A-Z 0-9 . _ -", sale.ErrInvalid, topic)
	}
	for _, b := range brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("%w: Kafka broker %q: want host:port", sale.ErrInvalid, b)
		}
	}
	return nil
}

// Name is the sink's name in the outbox.
func (s *Sink) Name() string { return "kafka:" + s.topic }

// Deliver produces e and returns once every in-sync replica has it.
func (s *Sink) Deliver(ctx context.Context, e sale.Event) error {
	body, err := relay.Body(e)
	if err != nil {
		return err
	}
	// No Timestamp: kgo times a record's delivery from it, and an event relayed late (after an
	// outage, a replay) would time out before it was sent. The event's time is in its value.
	r := &kgo.Record{Key: []byte(e.Subject()), Value: body,
		Headers: []kgo.RecordHeader{{Key: HeaderEventID, Value: []byte(e.ID)}, {Key: HeaderEventType, Value: []byte(e.Type)}}}
	return s.cl.ProduceSync(ctx, r).FirstErr()
}

// Close flushes and closes the producer.
func (s *Sink) Close() { s.cl.Close() }
