package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"seckill/internal/sale"
)

// BlockRequest is the body of POST /api/admin/blocks.
type BlockRequest struct {
	Kind   string `json:"kind"`  // "user" or "ip"
	Value  string `json:"value"` // a user id, an address or a CIDR network
	Reason string `json:"reason"`
	Until  string `json:"until"` // RFC 3339; empty: until removed
}

// Block turns the request into a domain entry; sale.Block.Normalize checks the rest.
func (b BlockRequest) Block() (sale.Block, error) {
	out := sale.Block{Kind: sale.BlockKind(b.Kind), Value: b.Value, Reason: b.Reason}
	if b.Until != "" {
		t, err := time.Parse(time.RFC3339, b.Until)
		if err != nil {
			return sale.Block{}, fmt.Errorf("%w: until must be an RFC 3339 time", sale.ErrInvalid)
		}
		out.Until = t
	}
	return out, nil
}

func (s *Server) addBlock(w http.ResponseWriter, r *http.Request) {
	var req BlockRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := req.Block()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteTarget(r, string(b.Kind)+":"+b.Value)
	if b, err = s.blocks.Add(r.Context(), b); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, blockResponse(b))
}

// BlockResponse is a blacklist entry (sale.Block).
type BlockResponse struct {
	Kind      sale.BlockKind `json:"kind"`
	Value     string         `json:"value"` // a user id, or an address or network in canonical CIDR form
	Reason    string         `json:"reason"`
	Until     time.Time      `json:"until,omitzero"`
	CreatedAt time.Time      `json:"created_at"`
}

func blockResponse(b sale.Block) BlockResponse {
	return BlockResponse{Kind: b.Kind, Value: b.Value, Reason: b.Reason, Until: b.Until, CreatedAt: b.CreatedAt}
}

func (s *Server) listBlocks(w http.ResponseWriter, r *http.Request) {
	bs, err := s.blocks.List(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]BlockResponse, len(bs))
	for i, b := range bs {
		out[i] = blockResponse(b)
	}
	writeJSON(w, http.StatusOK, map[string][]BlockResponse{"blocks": out})
}

func (s *Server) removeBlock(w http.ResponseWriter, r *http.Request) {
	if err := s.blocks.Remove(r.Context(), sale.BlockKind(r.PathValue("kind")), r.PathValue("value")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
