package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// blockOf turns a block request into a domain entry; sale.Block.Normalize checks the rest.
func blockOf(b wire.BlockRequest) (sale.Block, error) {
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
	var req wire.BlockRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := blockOf(req)
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

func blockResponse(b sale.Block) wire.BlockResponse {
	return wire.BlockResponse{Kind: b.Kind, Value: b.Value, Reason: b.Reason, Until: b.Until, CreatedAt: b.CreatedAt}
}

func (s *Server) listBlocks(w http.ResponseWriter, r *http.Request) {
	bs, err := s.blocks.List(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]wire.BlockResponse, len(bs))
	for i, b := range bs {
		out[i] = blockResponse(b)
	}
	writeJSON(w, http.StatusOK, wire.BlocksResponse{Blocks: out})
}

func (s *Server) removeBlock(w http.ResponseWriter, r *http.Request) {
	if err := s.blocks.Remove(r.Context(), sale.BlockKind(r.PathValue("kind")), r.PathValue("value")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
